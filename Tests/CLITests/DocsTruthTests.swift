// What the docs say, checked through the built tool (issue 22, item 8): the key lookup Docs/database.md shows, the raw
// key of the attachments file (Docs/attachments.md), what python keyring sees (Docs/keychain.md), and exit 66 for a
// missing key whatever other databases the application has (Docs/cli.md).
import Foundation
import TestSupport
import Testing

@Suite(.serialized) struct DocsTruthTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }
    private var data: String { work.path + "/data" }

    private func tool(_ arguments: [String], app: String, input: String = "") throws -> ProcessResult {
        try securestore(["--data-dir", data] + arguments, app: app, input: input)
    }

    /// The account of the current key of database `name`, as `db keys list --json` shows it (Docs/database.md).
    private func currentAccount(_ app: String, name: String) throws -> String? {
        let keys = try tool(["--json", "db", "keys", "list"], app: app)
        let items = try JSONSerialization.jsonObject(with: Data(keys.stdout.utf8)) as? [[String: Any]] ?? []
        return items.first { $0["role"] as? String == "current" && ($0["path"] as? String)?.hasSuffix("/\(name).db") == true }?[
            "account"] as? String
    }

    @Test func aMissingKeyIsExit66EvenWhenOtherDatabasesOfTheAppHaveTheirs() throws {
        let app = uniqueApp()
        #expect(try tool(["tasks", "add", "mine"], app: app).status == 0)
        #expect(try tool(["tasks", "add", "--name", "other", "theirs"], app: app).status == 0)
        let account = try #require(try currentAccount(app, name: "tasks"))
        #expect(try StoreClient.clear(service: "\(app).database-key", account: account))
        let path = canonicalPath(data + "/tasks.db")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        for command in [["tasks", "list"], ["db", "verify"], ["tasks", "add", "more"]] {
            let result = try tool(command, app: app)
            #expect(result.status == 66, "\(command): \(result.stderr)")
            #expect(result.stderr.hasPrefix("securestore: no key for database 'tasks' in the keyring"), "\(result.stderr)")
            #expect(result.stderr.contains("(hint: if you kept a recovery code, run `securestore db recover --name tasks`)"))
            #expect(result.stdout.isEmpty)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file was not changed")
        #expect(try tool(["tasks", "count", "--name", "other"], app: app).stdout == "1\n", "the other database still opens")

        // The same as an application with no other database.
        let alone = uniqueApp()
        #expect(try tool(["tasks", "add", "--name", "solo", "x"], app: alone).status == 0)
        let soloAccount = try #require(try currentAccount(alone, name: "solo"))
        #expect(try StoreClient.clear(service: "\(alone).database-key", account: soloAccount))
        #expect(try tool(["tasks", "list", "--name", "solo"], app: alone).status == 66)
    }

    /// Docs/database.md, "Opening a SecureStore file with the reference sqlcipher tool", as written.
    @Test func theKeyLookupOfTheDatabaseDocOpensTheFileWithSqlcipher() throws {
        let app = uniqueApp()
        #expect(try tool(["tasks", "add", "Read me elsewhere"], app: app).status == 0)
        let account = try #require(try currentAccount(app, name: "tasks"))
        let key = try StoreClient.lookup(service: "\(app).database-key", account: account) ?? ""
        #expect(key.wholeMatch(of: #/[0-9a-f]{64}/#) != nil)
        let opened = try sqlcipher(data + "/tasks.db", key: .raw(hex: key), pageSize: 4096, "SELECT title FROM tasks;\n")
        #expect(opened.stdout.hasSuffix("Read me elsewhere\n"), "\(opened.stdout) \(opened.stderr)")
    }

    /// Docs/attachments.md: the attachments key is 32 bytes kept in the record database, used as a raw key (`x'…'`),
    /// with 32 KiB pages.
    @Test func theAttachmentsFileOpensWithItsKeyAsARawKey() throws {
        let app = uniqueApp()
        let added = try tool(["tasks", "add", "Scans"], app: app)
        let file = work.path + "/scan.bin"
        #expect(try run(["sh", "-c", "head -c 200000 /dev/urandom > '\(file)'"]).status == 0)
        #expect(try tool(["tasks", "attach", String(added.stdout.prefix(8)), file], app: app).status == 0)
        let account = try #require(try currentAccount(app, name: "tasks"))
        let key = try StoreClient.lookup(service: "\(app).database-key", account: account) ?? ""
        let record = "SELECT lower(hex(key)) FROM securestore_attachment_key;\n"
        let attachmentsKey = try sqlcipher(data + "/tasks.db", key: .raw(hex: key), pageSize: 4096, record).stdout
            .split(separator: "\n").last.map(String.init) ?? ""
        #expect(attachmentsKey.wholeMatch(of: #/[0-9a-f]{64}/#) != nil, "\(attachmentsKey)")
        let opened = try sqlcipher(
            data + "/tasks.attachments.db", key: .raw(hex: attachmentsKey), pageSize: 32768, "SELECT count(*) > 0 FROM chunk;\n")
        #expect(opened.stdout.hasSuffix("1\n"), "\(opened.stdout) \(opened.stderr)")
        // As a passphrase (the bytes themselves, not x'…') it does not open.
        let passphrase = try sqlcipher(
            data + "/tasks.attachments.db", key: .passphrase(attachmentsKey), pageSize: 32768, "SELECT count(*) FROM chunk;\n")
        #expect(!passphrase.stdout.hasSuffix("1\n"))
    }

    /// Docs/keychain.md: python keyring's get_password does not find our tokens, but get_credential(service, None)
    /// returns one of them (whichever the keyring lists first); its items are not ours.
    @Test(
        .enabled(if: Harness.hasSecretService, "python keyring reads the Secret Service"),
        .enabled(if: Prerequisites.hasPythonKeyring, "python3-keyring is not installed ('make deps' installs it)"))
    func pythonKeyringSeesATokenThroughGetCredentialOnly() throws {
        let python = "/usr/bin/python3"
        let app = uniqueApp()
        #expect(try securestore(["token", "set", "github"], app: app, input: "ghp_python_sees_this").status == 0)
        defer { _ = try? securestore(["token", "delete", "github"], app: app) }
        let program = """
            import keyring, sys
            app = sys.argv[1]
            credential = keyring.get_credential(app, None)
            print(credential.username, credential.password)
            print(keyring.get_password(app, "github"))
            keyring.set_password(app, "pyuser", "pysecret")
            """
        let result = try run([python, "-c", program, app])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "None ghp_python_sees_this\nNone\n")
        let get = try securestore(["token", "get", "pyuser"], app: app)
        #expect(get.status == 66, "python keyring's items carry 'username', not 'account'")
        #expect(try securestore(["token", "list"], app: app).stdout == "github  \(app) token github\n")
        _ = try run(["secret-tool", "clear", "service", app, "username", "pyuser"])
    }
}
