# kablab: one command per job. Every target sets up what it needs.
PYTHON      := /usr/bin/python3
PLAYBOOK    := ansible-playbook
PROFILE     ?= smoke
PYTEST_ARGS ?=
# Extra ansible-playbook arguments for the campaign targets, e.g.
#   make smoke ARGS="-e kablab_mode=aa"  or  ARGS="-i inventory/two-hosts.yml"
ARGS        ?=
# Kernel builds cache-prune keeps per variant and profile.
KEEP        ?= 1

.PHONY: all bootstrap setup doctor kernels smoke campaign full report compare test check lint clean-domains cache-prune reliability-doc

all: smoke

# Ansible itself is the one thing the host-setup playbook cannot install.
bootstrap:
	@command -v $(PLAYBOOK) >/dev/null 2>&1 || { \
	  echo "kablab: installing ansible (Debian package)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ansible; }

setup: bootstrap
	$(PLAYBOOK) playbooks/host-setup.yml

# One line per host check (KVM, vPMU, host huge pages, nx_huge_pages,
# cpufreq, SMT, isolated CPUs, NUMA): ok / adds noise / invalidates + fix.
doctor: bootstrap
	$(PLAYBOOK) playbooks/doctor.yml -e kablab_profile=$(PROFILE) $(ARGS)

kernels: setup
	$(PLAYBOOK) playbooks/kernels.yml -e kablab_profile=$(PROFILE)

# The A/B campaign: kernels, image, guests, workloads, report.
campaign: setup
	$(PLAYBOOK) playbooks/site.yml -e kablab_profile=$(PROFILE) $(ARGS)

smoke:
	$(MAKE) campaign PROFILE=smoke

full:
	$(MAKE) campaign PROFILE=full

report:
	$(PLAYBOOK) playbooks/report.yml

# One report over two campaigns: make compare A=reports/<id1> B=reports/<id2> OUT=reports/cmp
OUT ?= reports/compare
compare:
	$(PYTHON) -m kablab.report.compare $(A) $(B) --out $(OUT)

lint: bootstrap
	yamllint -s .
	ansible-lint --profile production
	$(PYTHON) -m py_compile $$(git ls-files '*.py')
	shellcheck $$(git ls-files -z | xargs -0 awk 'FNR == 1 && /^#!.*[/ ](ba)?sh$$/ { print FILENAME }')

# The whole suite: lint, unit tests, then the booted-kernel, libvirt and
# campaign tests (they build what they need through the playbooks).
test: setup lint
	$(PYTHON) -m pytest -v -rA $(PYTEST_ARGS) tests

# The inner loop: lint and the tests that need no kernel, guest or libvirt
# (3 min 25 s and 5 min 41 s in two runs on this 2-core host, shared with
# other builds and guests, 2026-12-07).
FAST_TESTS := tests/unit tests/report tests/test_workloads.py tests/test_security.py tests/test_tlbmodel.py
check: lint
	$(PYTHON) -m pytest -q $(PYTEST_ARGS) $(FAST_TESTS)

# The suite writes its fault-case table to build/reliability.md (never over
# tracked files); this copies it over docs/reliability.md, deliberately.
reliability-doc:
	@test -s build/reliability.md || { echo "kablab: no build/reliability.md; run make test (the whole suite) first" >&2; exit 1; }
	cp build/reliability.md docs/reliability.md

clean-domains:
	$(PLAYBOOK) playbooks/teardown.yml

# Old kernel builds and their object trees (~250 MB each for ci); the
# newest KEEP per variant and what a manifest names stay. ARGS=--check lists.
cache-prune: bootstrap
	$(PLAYBOOK) playbooks/cache-prune.yml -e cache_prune_keep=$(KEEP) $(ARGS)
