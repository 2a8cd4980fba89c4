// `securestore prefs export|import`: the dconf dump/load of this tool.
internal import Foundation
internal import Preferences
internal import SecureStore
internal import SecureStoreCore

private let documentArgument = OptionalArgument("FILE", help: "The document (default: standard input).", completion: .files)
private let replaceFlag = Flag("replace", help: "Replace every stored preference instead of adding to them.")

/// `prefs export`: the stored values as a preferences document.
let prefsExportCommand = Command(
    name: "export", abstract: "Print the preferences as a document that 'prefs import' reads (a backup, another machine).",
    options: [outputOption],
    run: { invocation in
        let context = try Context(invocation)
        let location = try PreferencesLocation(directory: context.paths.configDirectory)
        guard fileExists(location.fileURL.path, followingLinks: true) else {
            throw CLIError(
                status: ExitStatus.notFound,
                message: "there are no preferences for application '\(context.paths.app)' (no file '\(location.fileURL.path)')",
                hint: "check --app; 'securestore prefs set KEY VALUE' creates them")
        }
        let document = try Preferences(location: location).exportDocument()
        if let output = try invocation[outputOption] {
            try writeFileAtomically(document, to: output)
        } else {
            document.withUnsafeBytes { Console.write($0) }
        }
        return ExitStatus.success
    })

/// `prefs import [FILE]`: stores a document's values as one version.
let prefsImportCommand = Command(
    name: "import", abstract: "Store the preferences of a document made by 'prefs export' (standard input without FILE).",
    discussion: """
        Added to the stored preferences (a value for the same key replaced), or instead of them with --replace.
        Every limit is checked before anything is written: a refused or damaged document changes nothing.
        Values the audit takes for secrets are named on standard error (never shown); move them to the
        keyring with 'securestore prefs move-to-keychain'.
        """,
    arguments: [documentArgument],
    options: [replaceFlag],
    run: { invocation in
        let context = try Context(invocation)
        let document: Data
        if let file = try invocation[documentArgument] {
            guard let bytes = try? readFile(file) else {
                throw CLIError(status: ExitStatus.notFound, message: "cannot read \(UsageError.quoted(file))")
            }
            document = Data(bytes)
        } else {
            document = FileHandle.standardInput.readDataToEndOfFile()
        }
        let location = try PreferencesLocation(directory: context.paths.configDirectory)
        let preferences = try Preferences(location: location)
        if let warning = try preferences.importDocument(document, replacing: invocation[replaceFlag]) {
            Console.err("securestore: \(warning)\n")
        }
        if invocation.global.json {
            try Console.json(
                PreferencesImportedJSON(imported: Preferences.documentValueCount(document), path: location.fileURL.path))
        }
        for finding in preferences.audit().secrets {
            Console.err("securestore: warning: \(UsageError.quoted(finding.key)) looks like a secret (\(finding.rule.id)); "
                + "move it with 'securestore prefs move-to-keychain'\n")
        }
        return ExitStatus.success
    })

/// Writes `data` to `path` through the export's atomic output file (0600, fsynced, renamed into place).
private func writeFileAtomically(_ data: Data, to path: String) throws {
    let file = try AtomicOutputFile(path: path)
    do {
        try FileDescriptor(rawValue: file.fd).writeAll([UInt8](data))
    } catch {
        throw CLIError(
            status: error.isDiskFull ? ExitStatus.ioError : ExitStatus.cannotCreate,
            message: "cannot write \(UsageError.quoted(path)): \(error)")
    }
    try file.commit()
}
