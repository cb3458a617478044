"""`nerve doctor`: check a deployment and say what to fix, in plain words (`run.py`: order, exit
code). Nothing is imported here: the log format borrows the report's redactor.
"""
