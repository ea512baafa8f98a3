from receiver.cli import main

main()
