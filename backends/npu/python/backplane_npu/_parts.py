"""The optional parts of this device that the package imports: the project's own device has
them all. A scaffold writes its own list instead, of the parts `backplane new-backend
--without PART` kept (backends/npu/new-backend-files.txt defines the parts)."""
PARTS = ("profiler", "compile", "collectives")
