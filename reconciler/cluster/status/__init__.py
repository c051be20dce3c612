"""Status where users look: ``objects`` reads and writes the ``Operator`` objects of the ``reconciler.dev`` group
(status and inventory), and the Events that announce their condition transitions."""
