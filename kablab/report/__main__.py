"""python3 -m kablab.report CAMPAIGN_DIR: render a campaign's report (cli.py)."""
import sys

from kablab.report.cli import main

sys.exit(main())
