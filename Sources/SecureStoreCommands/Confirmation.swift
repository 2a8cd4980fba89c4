// Bulk destructive commands (`tasks clear-done`, `tasks done-all`, `db keys prune`) say what they will do and ask
// on a terminal, as `rm -I` and `git clean -i` do; a script says `--yes`. Off a terminal nothing can answer, so
// without `--yes` they refuse (exit 64) before touching anything.
internal import Foundation

/// `--yes`: do it without asking.
let yesFlag = Flag("yes", help: "Do it without asking (needed when standard input or error is not a terminal).")

/// Whether a person can answer a question: standard input and standard error are both a terminal.
var canAsk: Bool { Console.stdinIsTerminal && Console.stderrIsTerminal }

/// Refuses a bulk destructive command off a terminal without `--yes`, before it opens anything: nothing is changed.
/// `does` says what the command does ("deletes every task that is done").
func requireYesOffTerminal(_ invocation: Invocation, _ does: String) throws {
    guard !invocation[yesFlag], !canAsk else { return }
    let command = (["securestore"] + invocation.path).joined(separator: " ")
    throw UsageError(
        "'\(command)' \(does): off a terminal it asks no question and needs --yes; nothing was changed",
        path: invocation.path)
}

/// On a terminal without `--yes`, says what is about to happen (`what`: "delete 3 done tasks …") and asks; anything
/// but `y` or `yes` leaves everything as it was (exit 1). With `--yes`, or when `what` is nil (nothing to do), it
/// asks nothing.
func confirm(_ what: String?, _ invocation: Invocation) throws {
    guard let what, !invocation[yesFlag] else { return }
    try requireYesOffTerminal(invocation, "changes data")
    Console.err("securestore: this will \(what). Continue? [y/N] ")
    let answer = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased()
    guard answer == "y" || answer == "yes" else {
        throw CLIError(status: ExitStatus.declined, message: "not confirmed; nothing was changed")
    }
}

/// `count` and `noun`, the noun in the plural unless the count is 1: "1 task", "3 tasks".
func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) " + (count == 1 ? noun : plural ?? noun + "s")
}
