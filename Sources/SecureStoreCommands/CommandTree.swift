/// The command tree: one entry per top-level command.
func commandTree() -> [Command] {
    [tokenCommand, tasksCommand, dbCommand, prefsCommand, keystoreCommand, lockCommand, syncCommand, gitCredentialCommand, completionCommand,
     manCommand, completeCommand]
}
