"""`tracer grade STUDENTS REFERENCE`: every student's spec diffed against the reference of its task, scored, one sheet."""
