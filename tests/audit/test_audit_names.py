"""The audit's static family tables agree with the real classes (imported here, never copied)."""

from __future__ import annotations

import importlib
import inspect

from omni_errors_audit import names


def test_vllm_family_table_lists_every_vllm_error_class_of_its_modules() -> None:
    """The table is exactly the installed vLLM's classes, and those of newer supported releases."""
    import vllm
    from vllm.exceptions import VLLMError

    installed = tuple(int(part) for part in vllm.__version__.split(".")[:2])
    for module_name, all_listed in names.VLLM_FAMILY_MODULES.items():
        listed = {name for name in all_listed if names.VLLM_FAMILY_SINCE.get(name, (0, 30)) <= installed}
        module = importlib.import_module(module_name)
        defined = {
            name
            for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, VLLMError) and obj.__module__ == module_name
        }
        assert defined == listed, module_name


def test_omni_family_table_is_the_exception_classes_of_omni_errors_exceptions_all() -> None:
    import omni_errors
    import omni_errors.semantics.exceptions as exceptions

    public_classes = {
        name
        for name in exceptions.__all__
        if inspect.isclass(getattr(exceptions, name)) and issubclass(getattr(exceptions, name), BaseException)
    }
    assert set(names.OMNI_TYPES) == public_classes
    for name in names.OMNI_TYPES:
        assert getattr(omni_errors, name) is getattr(exceptions, name)  # both import paths name one class


def test_status_constants() -> None:
    assert names.status_value("http.HTTPStatus.BAD_REQUEST") == 400
    assert names.status_value("http.HTTPStatus.NOT_FOUND.value") == 404
    assert names.status_value("fastapi.status.HTTP_422_UNPROCESSABLE_ENTITY") == 422
    assert names.status_value("http.HTTPStatus.NO_SUCH_THING") is None
    assert names.status_value("mymodule.CONSTANT") is None
