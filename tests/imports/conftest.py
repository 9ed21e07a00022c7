from tests.imports.mem0_fixtures import mem0_store  # noqa: F401 (the package's fixture)
