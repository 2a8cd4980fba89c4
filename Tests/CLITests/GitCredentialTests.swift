import Foundation
import TestSupport
import Testing
@testable import SecureStoreCommands

/// The real git client talking to `securestore git-credential` through credential.helper.
@Suite(.serialized) struct GitCredentialTests {
    init() throws { try Harness.require() }

    private func git(_ arguments: [String], app: String, input: String) throws -> ProcessResult {
        try TestSupport.git(arguments, input: input, credentialHelper: "!\(product("securestore")) --app \(app) git-credential")
    }

    @Test func approveFillRejectRoundTripThroughRealGit() throws {
        let app = uniqueApp()
        let approve = try git(
            ["credential", "approve"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n")
        #expect(approve.status == 0)

        let fill = try git(["credential", "fill"], app: app, input: "protocol=https\nhost=git.example.com\n\n")
        #expect(fill.status == 0)
        #expect(fill.stdout.contains("username=alice\n"))
        #expect(fill.stdout.contains("password=s3cret-pw\n"))

        // Stored in the keyring under the documented service, readable by other clients.
        #expect(try StoreClient.accounts(service: "\(app).git").contains("https://alice@git.example.com"))

        // A rejection with another (stale) password erases nothing.
        let staleReject = try git(
            ["credential", "reject"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=old-pw\n\n")
        #expect(staleReject.status == 0)
        #expect(try git(["credential", "fill"], app: app, input: "protocol=https\nhost=git.example.com\n\n")
            .stdout.contains("password=s3cret-pw"))

        // Rejecting the stored password erases it: git then has no credential and cannot prompt.
        let reject = try git(
            ["credential", "reject"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n")
        #expect(reject.status == 0)
        let after = try git(["credential", "fill"], app: app, input: "protocol=https\nhost=git.example.com\n\n")
        #expect(!after.stdout.contains("s3cret-pw"))
        #expect(try StoreClient.accounts(service: "\(app).git").isEmpty, "the item is gone from the keyring")
    }

    @Test func protocolDetailsUnknownOperationsExpiryAndOtherHosts() throws {
        let app = uniqueApp()
        let helper = { (operation: String, input: String) throws -> ProcessResult in
            try securestore(["git-credential", operation], app: app, input: input)
        }
        #expect(try helper("store", "protocol=https\nhost=a.example\nusername=u\npassword=p1\noauth_refresh_token=r1\n").status == 0)
        #expect(try helper("store", "protocol=https\nhost=b.example\nusername=u\npassword=p2\npassword_expiry_utc=1000\n").status == 0)

        let a = try helper("get", "protocol=https\nhost=a.example\n")
        #expect(a.stdout == "username=u\npassword=p1\noauth_refresh_token=r1\n")
        // Expired in 1970: not returned.
        let expired = try helper("get", "protocol=https\nhost=b.example\n")
        #expect(expired.status == 0 && expired.stdout == "" && expired.stderr == "")
        // Another protocol or host matches nothing.
        let otherProtocol = try helper("get", "protocol=http\nhost=a.example\n")
        #expect(otherProtocol.status == 0 && otherProtocol.stdout == "" && otherProtocol.stderr == "")
        // Unknown operations are ignored, as the protocol asks.
        let unknown = try helper("frobnicate", "protocol=https\nhost=a.example\n")
        #expect(unknown.status == 0 && unknown.stdout.isEmpty)
        #expect(try helper("get", "protocol=https\nhost=a.example\n").stdout.contains("password=p1"))
    }

    @Test func installedNameWorksAsAGitHelperEntryPoint() throws {
        let directory = try TemporaryDirectory()
        let link = directory.path + "/git-credential-securestore"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: product("securestore"))
        let app = uniqueApp()
        let store = try run([link, "--app", app, "store"], input: Data("protocol=https\nhost=c.example\nusername=u\npassword=p3\n".utf8))
        #expect(store.status == 0)
        let get = try run([link, "--app", app, "get"], input: Data("protocol=https\nhost=c.example\n".utf8))
        #expect(get.stdout == "username=u\npassword=p3\n")
    }
}

/// The keyring account of a credential: username and path percent-encoded with upper-case hex, read back as
/// they were given.
@Suite struct GitCredentialAccountTests {
    @Test func usernameAndPathRoundTripThroughTheAccount() throws {
        let account = GitCredentialStore.account(
            protocol: "https", host: "git.example.com", path: "org/my repo.git", username: "a.b@c%ü")
        #expect(account == "https://a.b%40c%25%C3%BC@git.example.com/org%2Fmy%20repo.git")
        let item = try #require(GitCredentialStore.parse(account))
        #expect(item.proto == "https" && item.host == "git.example.com")
        #expect(item.username == "a.b@c%ü" && item.path == "org/my repo.git")
    }

    @Test func aPercentThatStartsNoEscapeIsKept() throws {
        let item = try #require(GitCredentialStore.parse("https://a%zz%4@host/p%2x%2f"))
        #expect(item.username == "a%zz%4")
        #expect(item.path == "p%2x/")
    }
}
