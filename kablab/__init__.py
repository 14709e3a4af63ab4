"""kablab: the lab's Python, which the playbooks call and the report is made of.

- Inputs and plans (called by the Ansible filters in plugins/filter/):
  `inputs` (every input rule), `validate` (variants, workload settings),
  `plan` (boots, the TLB model decision, the campaign's workloads),
  `domains` (libvirt domain plans), `kbuild` and `kcache` (kernel keys,
  donors, the cache), `bootrun` (a boot's guest plan and its results).
- Scripts the hypervisors run with the standard library only: `doctor`,
  `framewatch`, `hostnoise`, `lock`.
- The result pipeline: `rawframe`, `rawparse`, `collect` (a result from a
  block's raw files), `load`, `tlbmodel` (the plugin's records).
- The report: `stats`, `robust`, `rounds`, `noise`, `panels`, `plots`,
  `render`, `textreport`, `fmt`, `report`, `compare`.
"""

__version__ = "0.1.0"
