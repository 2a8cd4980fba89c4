public import SecureStore

// The task list throws SecureStoreError, as the keyed database it lives in does: a program catches one error
// type for a task list and its database, and codes are open (a struct, not an enum), so the task list's own
// code is declared here, in the module that throws it (Docs/architecture.md, "Errors").

extension SecureStoreError.Code {
    /// A database is not a task list, and task commands never add tables to it.
    public static let notATaskList = Self("notATaskList")
}
