# A Python program for TestUnwindDWARFPythonJitdump: run calls mix_ints in a loop for the
# seconds of CPU time given. Under -X perf_jit, CPython runs each function through a
# trampoline of its own, written to its jitdump with the trampoline's frame information; it
# buffers the file and writes it out a few kilobytes at a time. So, as a program with more
# code would, it runs some more functions once after the first calls of these, and their
# records push those of run and mix_ints out to the file while the loop runs.
import sys
import time


def mix_ints(n):
    h = 0x12345678
    for i in range(n):
        h = ((h ^ i) * 31 + 7) & 0xFFFFFFFF
        h ^= h >> 15
    return h


def run(seconds):
    end = time.process_time() + seconds
    acc = 0
    while time.process_time() < end:
        acc ^= mix_ints(2000)
    return acc


run(0)
mix_ints(1)
for i in range(64):
    exec(f"def other{i}(): return {i}\nother{i}()")
print("done", run(float(sys.argv[1])))
