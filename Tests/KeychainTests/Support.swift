import Foundation
import Keychain
import TestSupport
import Testing

/// Expects `body` to throw a KeychainError with `code`, records an issue otherwise, and returns the error.
@discardableResult
func expectError<R>(
    _ code: KeychainError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> KeychainError? {
    do {
        _ = try body()
        Issue.record("expected KeychainError.\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as KeychainError {
        if error.code == code { return error }
        Issue.record("expected KeychainError.\(code), got \(error.code): \(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected KeychainError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
