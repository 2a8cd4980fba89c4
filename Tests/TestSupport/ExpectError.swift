// The one way the tests capture an error of the product: by its code, with an issue recorded when nothing or
// something else was thrown, and the error returned so that the test can check its message.
public import Attachments
public import EncryptedDatabase
public import Keychain
public import Preferences
public import Sync
public import Testing

/// An error of a product module: a code to match on and a message for a person (the five module errors).
public protocol CodedError: Error {
    associatedtype Code: ErrorCode where Code.Failure == Self
    /// What went wrong.
    var code: Code { get }
    /// What a person reads.
    var message: String { get }
}

/// The code of a ``CodedError``, which names its error type, so that `expectError(DatabaseError.Code.busy)` knows
/// what to catch.
public protocol ErrorCode: Equatable, CustomStringConvertible {
    associatedtype Failure: CodedError where Failure.Code == Self
}

extension DatabaseError: CodedError {}
extension DatabaseError.Code: ErrorCode { public typealias Failure = DatabaseError }
extension KeychainError: CodedError {}
extension KeychainError.Code: ErrorCode { public typealias Failure = KeychainError }
extension PreferencesError: CodedError {}
extension PreferencesError.Code: ErrorCode { public typealias Failure = PreferencesError }
extension SecureStoreError: CodedError {}
extension SecureStoreError.Code: ErrorCode { public typealias Failure = SecureStoreError }
extension SyncError: CodedError {}
extension SyncError.Code: ErrorCode { public typealias Failure = SyncError }

/// Expects `body` to throw the error of `code` (e.g. `DatabaseError.Code.busy`). Records an issue when it throws
/// nothing, another error or another code, and returns the error when the code matched (for checks of its
/// message), nil otherwise.
@discardableResult
public func expectError<Code: ErrorCode, R>(
    _ code: Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> Code.Failure? {
    let outcome: Result<R, any Error>
    do { outcome = .success(try body()) } catch { outcome = .failure(error) }
    return check(outcome, code, sourceLocation)
}

/// ``expectError(_:sourceLocation:_:)`` for a body that awaits.
@discardableResult
public func expectError<Code: ErrorCode, R>(
    _ code: Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> R
) async -> Code.Failure? {
    let outcome: Result<R, any Error>
    do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
    return check(outcome, code, sourceLocation)
}

private func check<Code: ErrorCode, R>(
    _ outcome: Result<R, any Error>, _ code: Code, _ sourceLocation: SourceLocation
) -> Code.Failure? {
    let expected = "\(Code.Failure.self).\(code)"
    switch outcome {
    case .success:
        Issue.record("expected \(expected), nothing was thrown", sourceLocation: sourceLocation)
    case .failure(let error as Code.Failure) where error.code == code:
        return error
    case .failure(let error as Code.Failure):
        Issue.record("expected \(expected), got \(error.code): \(error.message)", sourceLocation: sourceLocation)
    case .failure(let error):
        Issue.record("expected \(expected), got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
