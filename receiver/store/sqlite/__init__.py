"""The embedded backend: one SQLite file, written by a group-committing writer task or process.

Nothing is imported here: the writer process (``receiver.store.sqlite.writer``) loads this
package, and its footprint is what it imports itself.
"""
