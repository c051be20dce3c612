"""Health of what was applied: ``judge`` says per kind whether one live object is healthy, as kstatus does;
``wait`` polls every Operator's components together, bounded, until each is healthy or has failed."""
