"""Pictures and report.html, drawn from results rows and summaries.  Imports scoring and below."""
