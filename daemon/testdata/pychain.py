# A Python program for TestUnwindDWARFRuntimes/python-jitdump: workloads/runtimes/hot.py's
# run, which calls mix_ints and sum_squares in a loop for the seconds of CPU time given. Under
# -X perf_jit, CPython runs each function through a trampoline of its own, written to its
# jitdump with the trampoline's frame information; it buffers the file and writes it out a
# few kilobytes at a time. So, as a program with more code would, it runs some more
# functions once after the first calls of hot.py's, and their records push those of hot.py's
# out to the file before the loop runs.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "workloads", "runtimes"))
import hot  # noqa: E402

hot.mix_ints(1)
hot.sum_squares(1)
hot.run(0)
for i in range(64):
    exec(f"def other{i}(): return {i}\nother{i}()")
print("done", hot.run(float(sys.argv[1])))
