import Foundation
import Keychain
import Preferences
import SecureStore
import SecureStoreCore

/// `securestore prefs …`: the application's size-limited preferences.
let prefsCommand = Command(
    name: "prefs", abstract: "Read, write and audit preferences (small settings, size-limited).",
    subcommands: [
        prefsExportCommand,
        prefsImportCommand,
        Command(
            name: "get", abstract: "Print a preference's value.",
            arguments: [ArgumentSpec(name: "KEY", help: "The preference's key.")],
            run: { invocation in
                let preferences = try openPreferences(invocation, create: false)
                let key = invocation.argument(0) ?? ""
                guard let value = preferences.value(forKey: key) else {
                    throw CLIError(status: ExitStatus.notFound, message: "no preference \(UsageError.quoted(key))")
                }
                if invocation.global.json {
                    try Console.json(PreferenceJSON(key: key, type: value.typeName, value: PreferenceValueJSON(value)))
                } else {
                    // Raw for scripts (`$(securestore prefs get KEY)`); escaped when a terminal shows it.
                    Console.out((Console.stdoutIsTerminal ? escapedForTerminal(render(value)) : render(value)) + "\n")
                }
                return ExitStatus.success
            }),
        Command(
            name: "set", abstract: "Set a preference (a string unless a type option is given).",
            arguments: [
                ArgumentSpec(name: "KEY", help: "The preference's key."),
                ArgumentSpec(name: "VALUE", help: "The value, read according to the type option."),
            ],
            options: ValueType.allCases.map(\.flag),
            run: { invocation in
                let preferences = try openPreferences(invocation)
                let key = invocation.argument(0) ?? ""
                let value = try parseValue(invocation.argument(1) ?? "", invocation)
                if let warning = try preferences.set(value, forKey: key) {
                    Console.err("securestore: warning: \(warning)\n")
                }
                return ExitStatus.success
            }),
        Command(
            name: "delete", abstract: "Remove a preference.",
            arguments: [ArgumentSpec(name: "KEY", help: "The preference's key.")],
            run: { invocation in
                let preferences = try openPreferences(invocation)
                let key = invocation.argument(0) ?? ""
                guard try preferences.remove(key) else {
                    throw CLIError(status: ExitStatus.notFound, message: "no preference \(UsageError.quoted(key))")
                }
                return ExitStatus.success
            }),
        Command(
            name: "list", abstract: "List preferences with their types and values.",
            run: { invocation in
                let preferences = try openPreferences(invocation, create: false)
                let values = preferences.storedValues
                if invocation.global.json {
                    try Console.json(values.mapValues(PreferenceValueJSON.init))
                } else {
                    for key in values.keys.sorted() {
                        guard let value = values[key] else { continue }
                        // One key, one line: controls, bidi overrides and newlines in keys and values are escaped.
                        Console.out(
                            "\(escapedForTerminal(key)) (\(value.typeName)) = \(escapedForTerminal(render(value)))\n")
                    }
                }
                return ExitStatus.success
            }),
        Command(
            name: "audit",
            abstract: "Report sizes against the limits and values that look like secrets; exit 1 on a problem.",
            run: { invocation in
                let preferences = try openPreferences(invocation, create: false)
                let report = preferences.audit()
                Console.out(invocation.global.json ? report.renderJSON() + "\n" : report.renderText())
                return report.shouldFail ? ExitStatus.checkFailed : ExitStatus.success
            }),
        Command(
            name: "move-to-keychain",
            abstract: "Move a string preference into the keyring as a token, then remove it from preferences.",
            discussion: """
                The keyring write is verified (read back and compared) before the preference is removed,
                so the value is never lost: at worst it is in both places.
                """,
            arguments: [
                ArgumentSpec(name: "KEY", help: "The preference's key."),
                ArgumentSpec(name: "NAME", help: "The token name to store it under (default: KEY).", optional: true),
            ],
            run: { invocation in
                let context = try Context(invocation)
                let preferences = try openPreferences(invocation)
                let key = invocation.argument(0) ?? ""
                let name = invocation.argument(1) ?? key
                try PreferenceSecretMover(preferences: preferences, keychain: context.keychain, service: context.paths.tokenService)
                    .move(key: key, toAccount: name)
                Console.err("moved preference \(UsageError.quoted(key)) to the keyring as token \(UsageError.quoted(name))\n")
                return ExitStatus.success
            }),
        Command(
            name: "reset", abstract: "Move a damaged preferences file aside (timestamped) and start fresh.",
            run: { invocation in
                let context = try Context(invocation)
                let location = try PreferencesLocation(directory: context.paths.configDirectory)
                if let moved = try Preferences.reset(location) {
                    Console.err("moved \(location.fileURL.path) to \(moved.path)\n")
                }
                return ExitStatus.success
            }),
    ])

/// Opens the preferences of an invocation. Commands that only read (`create: false`) on an application
/// that has no preferences file create nothing — no file, no directory — and exit 66 with a hint.
private func openPreferences(_ invocation: Invocation, create: Bool = true) throws -> Preferences {
    let context = try Context(invocation)
    let location = try PreferencesLocation(directory: context.paths.configDirectory)
    if !create, !FileManager.default.fileExists(atPath: location.fileURL.path) {
        throw CLIError(
            status: ExitStatus.notFound,
            message: "there are no preferences for application '\(context.paths.app)' (no file '\(location.fileURL.path)')",
            hint: "check --app; 'securestore prefs set KEY VALUE' creates them")
    }
    return try Preferences(location: location)
}

/// The type options of `prefs set`: at most one, `string` when none is given.
private enum ValueType: String, CaseIterable {
    case string, int, double, bool, date, data

    var flag: Flag {
        switch self {
        case .string: Flag("string", help: "VALUE is a string (the default).")
        case .int: Flag("int", help: "VALUE is an integer.")
        case .double: Flag("double", help: "VALUE is a floating-point number.")
        case .bool: Flag("bool", help: "VALUE is true or false (also yes/no, 1/0).")
        case .date: Flag("date", help: "VALUE is an ISO 8601 date, e.g. 2026-11-21T10:00:00Z.")
        case .data: Flag("data", help: "VALUE is base64-encoded bytes.")
        }
    }
}

private func parseValue(_ text: String, _ invocation: Invocation) throws -> PreferenceValue {
    let types = ValueType.allCases.filter { invocation[$0.flag] }
    guard types.count <= 1 else {
        throw UsageError(
            "give at most one type option (got --\(types.map(\.flag.spec.name).joined(separator: " --")))", path: invocation.path)
    }
    func bad(_ type: String) -> UsageError {
        UsageError("VALUE is not \(type): \(UsageError.quoted(String(text.prefix(40))))", path: invocation.path)
    }
    switch types.first ?? .string {
    case .int:
        guard let value = Int(text) else { throw bad("an integer") }
        return .int(value)
    case .double:
        guard let value = Double(text), value.isFinite else { throw bad("a finite number") }
        return .double(value)
    case .bool:
        switch text.lowercased() {
        case "true", "yes", "1", "on": return .bool(true)
        case "false", "no", "0", "off": return .bool(false)
        default: throw bad("true or false")
        }
    case .date:
        guard let value = ISO8601DateFormatter().date(from: text) else { throw bad("an ISO 8601 date") }
        return .date(value)
    case .data:
        guard let value = Data(base64Encoded: text) else { throw bad("base64") }
        return .data(value)
    case .string:
        return .string(text)
    }
}

/// The encoder of arrays and dictionaries in text output (not `--json`, whose encoder is Console's): slashes
/// escaped, as this text has always shown them.
private let textEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()

/// A value as one line of text.
private func render(_ value: PreferenceValue) -> String {
    switch value {
    case .string(let string): return string
    case .bool(let bool): return bool ? "true" : "false"
    case .int(let int): return String(int)
    case .double(let double): return String(double)
    case .date(let date): return ISO8601DateFormatter().string(from: date)
    case .data(let data): return data.base64EncodedString()
    case .array, .dictionary:
        let data = (try? textEncoder.encode(PreferenceValueJSON(value))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
