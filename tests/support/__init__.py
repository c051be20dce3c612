"""What the tests share: the one repository builder (``repo``), the one bounded wait (``wait``), where data is
read from (``paths``), and the parts of the suite a run may leave untested (``parts``)."""
