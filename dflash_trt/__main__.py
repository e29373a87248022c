import sys

from dflash_trt.cli import main

sys.exit(main())
