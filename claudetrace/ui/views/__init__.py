"""The pages of the session browser (Streamlit; thin over :mod:`claudetrace.ui`)."""

from __future__ import annotations
