"""skfedcp on Flower: calibrate a shared model and select features across nodes."""
