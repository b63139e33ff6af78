"""The transaction coordinator (ZooKeeper mode): TransactionCoordinator, TransactionStateManager,
TransactionMarkerChannelManager and the __transaction_state record formats."""
