/// The command tree: one entry per top-level command.
func commandTree() -> [Command] {
    [tokenCommand, tasksCommand, dbCommand, prefsCommand, gitCredentialCommand, completionCommand, manCommand, completeCommand]
}
