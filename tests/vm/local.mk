# A QEMU guest with a pure cgroup v2 hierarchy, where Slurm runs with
# CgroupPlugin=cgroup/v2 (tests/vm/README.md).  Not part of `make check`: it
# needs root, builds a guest image and boots it under TCG (minutes).
# (This fragment itself is distributed by automake as an included file.)
EXTRA_DIST += tests/vm/README.md
EXTRA_DIST += tests/vm/vm.sh
EXTRA_DIST += tests/vm/smoke.sh
EXTRA_DIST += tests/vm/measure-v2.sh
EXTRA_DIST += tests/vm/e2e-v2.sh
EXTRA_DIST += tests/vm/bench-v2.sh

# Slurm's cgroup/v2 in the guest (tests/vm/smoke.sh), with this build's
# plugin: run by scripts/run-tests.sh after the other layers. The guest sees
# the source tree (read-only, at the same path), so the build must be inside
# it (the default ./build); otherwise the layer is skipped (77).
check-cgroup-v2: all tests/unit/test_slurm_cgroup$(EXEEXT) tests/unit/test_bpf_devices$(EXEEXT)
	@src=$$(cd '$(abs_top_srcdir)' && pwd -P); bld=$$(cd '$(abs_top_builddir)' && pwd -P); \
	case "$$bld/" in \
	  "$$src/"*) ;; \
	  *) echo "check-cgroup-v2: skipped: the build ($$bld) is outside the source tree the guest sees ($$src)"; exit 77 ;; \
	esac; \
	SK_VM_SHARE="$$src" SK_VM_ENV=SK_TOP_BUILDDIR SK_TOP_BUILDDIR="$$bld" \
	  bash "$$src/tests/vm/vm.sh" run "$$src/tests/vm/smoke.sh"

# The e2e layer's cgroup v2 case (tests/vm/e2e-v2.sh: pod_devices on v2 with the
# test API server, an agent and kubectl in the guest; 3 GiB for them).
check-cgroup-v2-e2e: all
	@src=$$(cd '$(abs_top_srcdir)' && pwd -P); bld=$$(cd '$(abs_top_builddir)' && pwd -P); \
	case "$$bld/" in \
	  "$$src/"*) ;; \
	  *) echo "check-cgroup-v2-e2e: skipped: the build ($$bld) is outside the source tree the guest sees ($$src)"; exit 77 ;; \
	esac; \
	SK_VM_MEM=3072 SK_VM_SHARE="$$src" SK_VM_ENV=SK_TOP_BUILDDIR SK_TOP_BUILDDIR="$$bld" \
	  bash "$$src/tests/vm/vm.sh" run "$$src/tests/vm/e2e-v2.sh"

.PHONY: check-cgroup-v2 check-cgroup-v2-e2e
