import Foundation
import TestSupport

/// Runs the built `securestore` on a real pseudo-terminal (python3's pty module): standard input, output and
/// error are the terminal. Each time the tool waits at a prompt (output ending in ": " or "] "), the next of
/// `answers` is typed, followed by Enter. Returns the exit status and everything the terminal showed.
func securestoreOnTerminal(_ arguments: [String], app: String, answers: [String]) throws -> (status: Int32, screen: String) {
    let script = #"""
        import os, pty, select, sys
        answers = [a for a in sys.argv[1].split("\x1f")] if sys.argv[1] else []
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(sys.argv[2], sys.argv[2:])
        screen = b""
        pending = b""
        while True:
            ready, _, _ = select.select([fd], [], [], 10)
            if not ready:
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
            pending += chunk
            if answers and (pending.endswith(b": ") or pending.endswith(b"] ")):
                os.write(fd, answers.pop(0).encode() + b"\n")
                pending = b""
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(screen.decode("utf-8", "replace"))
        sys.exit(os.waitstatus_to_exitcode(status) & 0xff)
        """#
    let result = try run(
        ["python3", "-c", script, answers.joined(separator: "\u{1F}"), product("securestore"), "--app", app] + arguments)
    return (result.status, result.stdout)
}
