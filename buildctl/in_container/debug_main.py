"""Run a Python program as `python FILE` would, with faulthandler writing the Python stack of a crash into
a file (`invoke debug`, under gdb; standard library only):

    python debug_main.py STACK_FILE PROGRAM [NAME]

NAME: the file name the code runs under (`<string>` for code given as text, as `python -c` shows it;
a script's path as the user gave it, so that its frames point at the user's file).
Only this file's own frame is added below the program's, and the report on the host drops it.
"""
import faulthandler
import os
import sys


def main():
    stack_file, program = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else program
    with open(program, encoding="utf-8") as f:
        code = compile(f.read(), name, "exec")
    stack = open(stack_file, "w")  # open until the process ends: the handler writes into it at the crash
    faulthandler.enable(file=stack, all_threads=False)
    sys.argv = [name]
    # as `python FILE` (the script's folder) and `python -c` (the working directory) set it
    sys.path[0] = "" if name.startswith("<") else os.path.dirname(os.path.abspath(program))
    globals_ = {"__name__": "__main__", "__file__": name, "__builtins__": __builtins__}
    exec(code, globals_)


if __name__ == "__main__":
    main()
