import sys

from payments_merchant.cli import main

sys.exit(main())
