"""Image backends (nnabla's ``nnabla.utils.image_utils.backend_events``). nnabla_jit has one,
Pillow (``pil_backend``); nnabla's cv2, pypng and pydicom backends are not provided."""
