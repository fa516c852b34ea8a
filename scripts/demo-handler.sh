#!/bin/sh
# The demo's exec handler: prompt.json arrives on stdin, the job's identity
# in FARRO_* variables. Exit 0 means succeeded.
p=$(cat)
case "$p" in *'"slow"'*) sleep 3 ;; esac
case "$p" in *'"flaky"'*)
	if [ "$FARRO_ATTEMPT" -lt 2 ]; then
		echo "flaky job: failing attempt $FARRO_ATTEMPT on purpose" >&2
		exit 1
	fi ;;
esac
case "$p" in *'"broken"'*)
	echo "broken job: this job always fails" >&2
	exit 1 ;;
esac
echo "job $FARRO_JOB_ID done on attempt $FARRO_ATTEMPT"
