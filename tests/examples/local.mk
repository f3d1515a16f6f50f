# The online-RL example's programs (examples/online-rl) as plain processes.
# They run no program of this tree: an ASan + UBSan build has nothing to add.
EXTRA_DIST += \
	tests/examples/local.mk \
	tests/examples/test_online_rl.sh \
	tests/examples/online_rl_test.py
if !SANITIZERS
TESTS += tests/examples/test_online_rl.sh
endif
