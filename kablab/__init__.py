"""kablab: the lab's Python, which the playbooks call and the report is made of.

Its folders name the constraints their modules live under:

- lab/: what the Ansible filters (plugins/filter/kablab_filters.py) and the
  stages call: inputs (every input rule), validate (variants, workload
  settings), plan (boots, lanes, the TLB model decision, the campaign's
  workloads), domains (libvirt domain plans), kbuild and kcache (kernel
  keys, donors, the cache), bootrun (a boot's guest plan, its record and
  its results).
- remote/: scripts the hypervisors run as they are, with the standard
  library only: doctor, framewatch, hostnoise, lock.
- results/: the result pipeline: rawframe, rawparse, collect (a result
  from a block's raw files), load, tlbmodel (the plugin's records).
- report/: statistics over boots (stats, robust, rounds, power, noise),
  the panels, plots and renderings (render, textreport, fmt), compare,
  and the CLI (python3 -m kablab.report).
- util: atomic writes and the result schema, shared by all of them.
"""

__version__ = "0.1.0"
