#!/bin/bash
# absrv12.sh OUT N A_DIR B_DIR: N alternating pairs of the server bench at c = 1, 2 (ar, auto)
exec env LEVELS=1,2 bash "$(dirname "$0")/../2026-11-27-cpu-draft-budget-s11/absrv4.sh" "$@"
