"""The models that run a Program (the transaction-level model) and the runners and CLI around them."""
