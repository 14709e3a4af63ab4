"""Scripts the hypervisors run as they are (ansible.builtin.script): the standard library only,
no import of the package (tests/unit/test_layout.py checks)."""
