// Attachments are a module of their own (Docs/architecture.md), below the keyed database, which wires them into
// its backups and restores. `import SecureStore` still gives `AttachmentStore`, its types and `SecureStoreError`
// (declared in Attachments, the lowest module that throws it), as it did before the split: apps that import
// SecureStore compile unchanged. A program that needs attachments without the keyed database imports Attachments.
@_exported public import Attachments
