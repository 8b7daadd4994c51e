"""Knowledge the tests add in temporary folders: a rule of a new wording, a GPU no kb has."""

from __future__ import annotations

# A wording no shipped rule and no region vocabulary knows, and that says no error word.
WIDGET_RULE = """\
id = "config-error/widget-quota-gave-up"
cause = "config-error"
title = "The widget scheduler gave up on its quota"
severity = "fatal"
confidence = 0.9
references = ["example-org/widget#7"]
summary = "The widget scheduler gave up: quota {quota}."

[match]
scope = "region"
any = [ { regex = 'widget scheduler gave up on quota (?P<quota>\\d+)', extract = { quota = "int" } } ]

[[examples]]
name = "plain"
expect = "match"
log = '''
widget scheduler gave up on quota 7
'''

[[examples]]
name = "fine"
expect = "no-match"
log = '''
widget scheduler kept quota 7
'''
"""

# A product the shipped kb/gpus.toml does not list (for a kb folder's gpus.toml).
ZETA_GPU = """\
[[gpu]]
name = "NVIDIA Zeta 9000"
capability = "12.0"
memory_gb = [96]
source = "https://example.org/zeta"
memory_source = "https://example.org/zeta"
"""
