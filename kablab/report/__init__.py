"""The report: statistics over boots, the panels, the HTML and text renderings.

    python3 -m kablab.report CAMPAIGN_DIR    (kablab/report/cli.py)
"""
