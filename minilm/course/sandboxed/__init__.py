"""What runs inside the grader's sandbox, beside the student's code: it decides nothing.

The worker (worker.py) runs each task's code on the grader's inputs and writes the outputs as
plain data; the nbval plugin (nbval_plugin.py) fails a cell at once when its kernel dies, and
starts its kernels over unix sockets, where a sandbox allows no other kind. The
student's code can rewrite anything here while it runs, so the trusted grader, which lives only
in the instructor's repository (solutions/grading/), reads what they leave as data and decides.
"""
