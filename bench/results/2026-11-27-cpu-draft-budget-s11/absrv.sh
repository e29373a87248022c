#!/bin/bash
# absrv.sh OUT N A_DIR B_DIR: N alternating pairs of the server bench at c = 8, 16 (ar, auto)
exec env LEVELS=8,16 bash "$(dirname "$0")/absrv4.sh" "$@"
