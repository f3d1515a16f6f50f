# The one result protocol of the test layers: tests/lib/report.sh (what a
# script layer writes: a TAP line per check to $SK_RESULT_FILE, report_run
# for a layer's parts) and tests/lib/results.py (what reads them: counts,
# automake's .trs as records, the per-layer summary of scripts/run-tests.sh).
EXTRA_DIST += \
	tests/lib/report.sh \
	tests/lib/results.py \
	tests/lib/test_report.sh
# The protocol itself: what report_run records, what results.py counts.
TESTS += tests/lib/test_report.sh
