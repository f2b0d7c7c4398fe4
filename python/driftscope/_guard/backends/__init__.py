"""The backends guard runs: the interface (base), one module per runtime, and the registry that
lists them and loads the plugins (registry). Importing this package imports none of them.
"""
