"""Stack frames: demangling, C++ name parsing, kernel vocabulary and per-dialect frame lines."""
