"""From raw bytes to normalised lines: reading, undoing terminal/shipper/chat damage, scanning."""
