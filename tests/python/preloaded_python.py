"""The tests' Python, preloaded: a fork server that imports torch, transformers and peft once.

The suite runs about sixty Python reference scripts (tests/python/*.py); each spent 3-5 CPU
seconds importing torch and transformers before its first line of work, a fifth of the whole
suite's CPU time. Here one server process imports them once, and each script runs in a fork of
it: the same interpreter, modules and venv, with the caller's arguments, environment, working
folder and standard streams (passed over the socket as file descriptors), its exit status sent
back. Nothing a script computes changes; only the imports are shared.

  preloaded_python.py start NAME LOG     start the server (abstract socket NAME; log to LOG)
  preloaded_python.py stop NAME          stop it
  preloaded_python.py run NAME PYTHON ARGS...
                                         the client: run `PYTHON ARGS...` through the server
                                         when ARGS start with a .py script and a server
                                         answers; otherwise exec PYTHON itself

The tests' `python` (build/tests/python/python, written by tests/CMakeLists.txt) is the client;
CTest starts and stops the server around the suite (its fixture `python`). No server (a single
test run by hand, the GPU bundle): every script runs in its own process as before. Only the
user who started the server may run scripts through it (SO_PEERCRED). On a machine with an
NVIDIA device the server does not start: a fork of a process that touched CUDA cannot use it.
"""
import json
import os
import socket
import struct
import sys
import time

IDLE_SECONDS = 900  # the server ends by itself when nobody called it for this long


def address(name):
    return "\0" + name  # Linux's abstract namespace: no file to clean up, no path length limit


def connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(address(name))
    except OSError:
        s.close()
        return None
    return s


def run(name, python, args):
    if args and args[0].endswith(".py") and os.path.isfile(args[0]):
        s = connect(name)
        if s is not None:
            request = {"argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}
            try:
                socket.send_fds(s, [json.dumps(request).encode()], [0, 1, 2])
            except OSError:  # a standard stream closed: run it the plain way
                s.close()
                s = None
        if s is not None:
            try:
                reply = s.recv(4096)
            except ConnectionResetError:
                # The server ended (stopped) with the request unread in its queue: the script
                # never started there, so it runs the plain way.
                reply = None
            if reply is not None:
                if not reply:
                    sys.stderr.write("preloaded python: %s ended without an exit status\n" % args[0])
                    os._exit(1)
                os._exit(json.loads(reply)["exit"])
            s.close()
    os.execv(python, [python] + args)


def stop(name):
    s = connect(name)
    if s is not None:
        s.send(json.dumps({"stop": True}).encode())
        s.close()


def exit_code(e):
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    sys.stderr.write(str(e.code) + "\n")
    return 1


def run_script(conn, request, fds):
    """In the fork: become the script's process, run it, send its exit status."""
    import runpy
    import signal
    import threading
    import traceback
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it; subprocess needs it
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))

    def client_gone():  # the caller was stopped (a test's timeout): so is the script
        conn.recv(1)
        os._exit(1)
    threading.Thread(target=client_gone, daemon=True).start()
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = exit_code(e)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        conn.send(json.dumps({"exit": code}).encode())
    finally:
        os._exit(code)


def preload():
    # What the reference scripts import, each only where installed (requirements-test.txt).
    # transformers resolves its model classes lazily: name the ones the scripts use.
    import importlib
    for module in ("torch", "torch.nn.functional", "numpy", "safetensors.torch", "tokenizers",
                   "sentencepiece", "transformers", "transformers.models.llama.modeling_llama",
                   "transformers.models.qwen2.modeling_qwen2", "peft"):
        try:
            importlib.import_module(module)
        except Exception as e:
            print("preloaded python: not preloaded: %s (%s)" % (module, e), flush=True)
    try:
        from transformers import (AutoModelForCausalLM, AutoTokenizer,  # noqa: F401
                                  PreTrainedTokenizerFast)
    except Exception:
        pass


def serve(listener, ready):
    import signal
    os.write(ready, b"1")
    os.close(ready)
    preload()
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forks reap themselves
    listener.settimeout(IDLE_SECONDS)
    uid = os.getuid()
    while True:
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            return
        conn.settimeout(None)
        peer_uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                       struct.calcsize("3i")))[1]
        if peer_uid != uid:
            conn.close()
            continue
        try:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            request = json.loads(message)
        except (OSError, ValueError):
            conn.close()
            continue
        if request.get("stop"):
            return
        if os.fork() == 0:
            listener.close()
            run_script(conn, request, fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def start(name, log):
    if os.path.exists("/dev/nvidiactl"):
        print("preloaded python: an NVIDIA device is present; scripts run in their own processes")
        return 0
    stop(name)  # a server left by an earlier run of this build
    ready_r, ready_w = os.pipe()
    if os.fork() > 0:
        os.close(ready_w)
        if os.read(ready_r, 1) != b"1":  # the tests still run, each script in its own process
            print("preloaded python: the server did not start (see %s)" % log)
        return 0
    os.close(ready_r)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for _ in range(50):  # the stopped server may still hold the name for a moment
        try:
            listener.bind(address(name))
            break
        except OSError:
            time.sleep(0.1)
    else:
        print("preloaded python: %s is taken" % name, flush=True)
        os._exit(1)
    listener.listen(64)
    serve(listener, ready_w)
    os._exit(0)


def main(argv):
    if len(argv) >= 4 and argv[1] == "run":
        run(argv[2], argv[3], argv[4:])
    if len(argv) == 4 and argv[1] == "start":
        return start(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "stop":
        stop(argv[2])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
