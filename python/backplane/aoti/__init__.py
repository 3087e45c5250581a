"""AOTInductor packages (.pt2): what Backplane records in them when it packages a model
and checks when it loads one (backplane.load_package).

    archive         the one reader of a .pt2 archive: entry names checked, records read by name
    layouts         each input's compiled layout (a record in the package) and the rule per input
    plugins         which plugin served each backplane op when the package was made (a record)
    packaging_hook  writes that record into every package torch._inductor.aoti_compile_and_package
                    makes in this process (installed here, when torch._inductor is imported)
    libstdcxx       a model library that links libstdc++ statically crashes when loaded: refused
    package         load_package: the loader that applies every check above
"""
from ..import_hooks import when_imported
from .packaging_hook import install

when_imported("torch._inductor", install)
