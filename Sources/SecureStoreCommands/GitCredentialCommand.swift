internal import Foundation
internal import SecureStore

/// Completed to the three operations, but not checked: the protocol asks a helper to ignore the ones it does not know.
private let operationArgument = Argument(
    "OPERATION", help: "get, store or erase (given by git).", completion: .words(["get", "store", "erase"]))

/// `securestore git-credential get|store|erase`: git's credential-helper protocol.
let gitCredentialCommand = Command(
    name: "git-credential", abstract: "Act as a git credential helper (get, store, erase).",
    discussion: """
        Use it with: git config --global credential.helper '!securestore git-credential'
        (or install git-credential-securestore and use credential.helper securestore).
        Credentials live in the key store (keyring or key file) under service <app>.git. Unknown operations are ignored,
        as the protocol asks; erase removes a credential only when its stored password matches.
        """,
    arguments: [operationArgument],
    readsSecret: true,
    run: { invocation in
        let context = try Context(invocation)
        let store = GitCredentialStore(keychain: context.keychain, service: context.paths.gitCredentialService)
        let operation = try invocation[operationArgument]
        guard ["get", "store", "erase"].contains(operation) else { return ExitStatus.success }
        let input = FileHandle.standardInput.readDataToEndOfFile()
        let request = GitCredentialStore.Message(parsing: String(decoding: input, as: UTF8.self))
        switch operation {
        case "get":
            if let answer = try store.get(request) { Console.out(answer.serialized) }
        case "store":
            try store.store(request)
        default:
            try store.erase(request)
        }
        return ExitStatus.success
    })
