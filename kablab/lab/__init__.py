"""The lab's plans, keys and input rules: what the Ansible filters (plugins/filter/) call."""
